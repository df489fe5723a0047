//! The user's Python files: the `python/` folder under the config folder, loaded into the
//! sandbox, watched, and turned into tools and callbacks of the agent. The folder's own `.py`
//! files stand alone; an app in Google's layout in it (`app.json`, `tools/…/python_code.py`,
//! `agents/…_callbacks/…/python_code.py`) loads as its JSON declares it, its files named by
//! their path in the folder ([`pysandbox::Folder`]).
//!
//! The sandbox's component is compiled in the background at start-up (tens of seconds the first
//! time, then read from a cache in the data folder), so the first window never waits for it;
//! until it is ready the files show as waiting and the agent has the built-in tools only. Every
//! change to the folder (from the in-app editor or any other) reloads all files, and the agent
//! is rebuilt for the next turn. A file that does not load is shown with its error and line and
//! left out; the others and the built-in tools go on.

pub(crate) mod host;
pub mod view;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use pysandbox::{
    Folder, LoadError, PythonExtensions, Reporter, Sandbox, SandboxConfig, SandboxError,
};

use crate::settings::assistant::PythonFileSettings;
use crate::sync::lock;
use view::{PythonFileView, PythonReportView, SandboxStateView, ToolDeclarationView};

/// Overrides where the compiled sandbox is cached (the end-to-end tests share one).
pub const CACHE_ENV: &str = "FEISHU_COMPANION_PYTHON_CACHE";

/// The editor's template for a new file.
pub const TEMPLATE: &str = include_str!("template.py");

/// How many recent reports (failures, printed output) each file keeps for the editor.
const REPORTS_PER_FILE: usize = 20;

/// How long the folder must be quiet before a change is loaded: an editor's save is often
/// several writes (a temporary file, a rename).
const SETTLE: Duration = Duration::from_millis(200);

/// Where the sandbox stands.
#[derive(Debug, Clone)]
pub(crate) enum SandboxState {
    /// Not started: the folder had no Python file. Most people never write one, and the sandbox
    /// holds tens of megabytes once loaded (the interpreter's snapshot, a pool of instances), so
    /// it starts with the first file, or the first use, instead of with the app.
    Idle,
    /// Being compiled (or read from the cache) since then.
    Preparing(Instant),
    /// Ready; compiled now (how long it took) or read from the cache.
    Ready(Sandbox),
    /// It could not be set up; Python files cannot run.
    Failed(String),
}

/// What loading a file gave.
#[derive(Debug, Clone, Default)]
pub(crate) struct FileStatus {
    pub(crate) tools: Vec<ToolDeclarationView>,
    pub(crate) callbacks: Vec<String>,
    pub(crate) error: Option<LoadFailure>,
}

/// Milliseconds since the Unix epoch, for log lines a script lines up with its own clock.
fn unix_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// A file's error, worded for the user.
#[derive(Debug, Clone)]
pub(crate) struct LoadFailure {
    pub(crate) zh: String,
    pub(crate) en: String,
    pub(crate) line: Option<u32>,
    pub(crate) traceback: String,
}

/// The Python side of the app.
pub(crate) struct PythonTools {
    dir: PathBuf,
    cache_dir: PathBuf,
    /// The cache folder was chosen by the options or the environment, not defaulted.
    cache_overridden: bool,
    resources: crate::resources::Resources,
    state: Mutex<SandboxState>,
    extensions: RwLock<Arc<PythonExtensions>>,
    statuses: Mutex<BTreeMap<String, FileStatus>>,
    reports: Arc<Mutex<BTreeMap<String, Vec<PythonReportView>>>>,
    /// Allowed hosts and the Feishu tick, by file (from the settings).
    pub(crate) files: Arc<RwLock<BTreeMap<String, PythonFileSettings>>>,
    /// Serialises reloads: one at a time, the latest folder wins.
    reloading: tokio::sync::Mutex<()>,
    watcher: Mutex<Option<notify::RecommendedWatcher>>,
}

impl std::fmt::Debug for PythonTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PythonTools")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl PythonTools {
    /// The app's: `python/` under the config folder (created), the compiled sandbox cached in
    /// the data folder (or where the options say), the component found among the resources.
    pub(crate) fn for_app(
        paths: &crate::paths::AppPaths,
        options: &crate::options::OpenOptions,
    ) -> Result<PythonTools, crate::error::CompanionError> {
        let dir = paths.python_dir();
        std::fs::create_dir_all(&dir).map_err(|e| {
            crate::error::CompanionError::Other(format!("cannot create {}: {e}", dir.display()))
        })?;
        // The end-to-end tests keep one compiled sandbox for every run of the real app.
        let chosen = options.python_cache_dir.clone().or_else(|| {
            std::env::var_os(CACHE_ENV)
                .filter(|v| !v.is_empty())
                .map(Into::into)
        });
        let resources = crate::resources::Resources::new(options.resource_dir.clone());
        let mut tools = PythonTools::new(
            dir,
            chosen
                .clone()
                .unwrap_or_else(|| crate::resources::python_sandbox_cache_dir(&paths.data_dir)),
            resources,
        );
        tools.cache_overridden = chosen.is_some();
        Ok(tools)
    }

    pub(crate) fn new(
        dir: PathBuf,
        cache_dir: PathBuf,
        resources: crate::resources::Resources,
    ) -> PythonTools {
        PythonTools {
            dir,
            cache_dir,
            cache_overridden: false,
            resources,
            state: Mutex::new(SandboxState::Idle),
            extensions: RwLock::new(Arc::default()),
            statuses: Mutex::default(),
            reports: Arc::default(),
            files: Arc::default(),
            reloading: tokio::sync::Mutex::new(()),
            watcher: Mutex::new(None),
        }
    }

    /// The folder.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Marks the sandbox as being prepared, if nothing has started it yet: whoever gets `true`
    /// calls [`Self::prepare_sandbox`], once in the app's life.
    pub(crate) fn begin_preparing(&self) -> bool {
        let mut state = lock(&self.state);
        if matches!(*state, SandboxState::Idle) {
            *state = SandboxState::Preparing(Instant::now());
            true
        } else {
            false
        }
    }

    /// Records that the sandbox cannot start, for the views and anyone waiting on it.
    pub(crate) fn set_failed(&self, message: String) {
        *lock(&self.state) = SandboxState::Failed(message);
    }

    /// Whether the folder holds any Python file, loadable or not. Reads every file.
    pub(crate) fn has_files(&self) -> bool {
        !self.file_names().is_empty()
    }

    /// Compiles (or loads from the cache) the sandbox's component; blocking, tens of seconds
    /// the first time. Run on a blocking thread.
    pub(crate) fn prepare_sandbox(&self) {
        let built = SandboxConfig::default().component;
        let Some(component) = self.resources.python_sandbox_component(Some(&built)) else {
            let message = format!(
                "the Python sandbox ({}) is missing from this installation; reinstall the app \
                 (安装不完整，缺少 Python 沙箱，请重新安装)",
                crate::resources::PYTHON_SANDBOX_COMPONENT
            );
            tracing::warn!("{message}");
            *lock(&self.state) = SandboxState::Failed(message);
            return;
        };
        // A development build's own component is cached beside it under target/ (one compiled
        // copy for every test and run of this checkout); an installed one in the data folder.
        let cache_dir = if component == built && !self.cache_overridden {
            SandboxConfig::default().cache_dir
        } else {
            Some(self.cache_dir.clone())
        };
        // An installed component has its compiled copy beside it; a development build has none,
        // which pysandbox takes as it takes a copy made from another component: it compiles.
        let config = SandboxConfig {
            precompiled: Some(
                component.with_file_name(crate::resources::PYTHON_SANDBOX_PRECOMPILED),
            ),
            component,
            cache_dir,
            ..SandboxConfig::default()
        };
        let started = Instant::now();
        let state = match Sandbox::new(config) {
            Ok(sandbox) => {
                // The start-up script and the installed-app test read this line.
                tracing::info!(
                    "the Python sandbox is ready: {} in {} ms (unix_ms={})",
                    match sandbox.compiled() {
                        pysandbox::CacheOutcome::Precompiled => "shipped compiled copy",
                        pysandbox::CacheOutcome::Hit => "compiled copy from the cache",
                        pysandbox::CacheOutcome::Compiled(_) => "compiled now",
                    },
                    started.elapsed().as_millis(),
                    unix_ms()
                );
                SandboxState::Ready(sandbox)
            }
            Err(e) => {
                tracing::warn!(error = %e, "the Python sandbox cannot start");
                SandboxState::Failed(e.to_string())
            }
        };
        *lock(&self.state) = state;
    }

    pub(crate) fn sandbox_state(&self) -> SandboxState {
        lock(&self.state).clone()
    }

    pub(crate) fn sandbox(&self) -> Option<Sandbox> {
        match &*lock(&self.state) {
            SandboxState::Ready(sandbox) => Some(sandbox.clone()),
            _ => None,
        }
    }

    /// The loaded tools and callbacks.
    pub(crate) fn extensions(&self) -> Arc<PythonExtensions> {
        self.extensions
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The Python files of the folder, by name: its own `.py` files, and those of the apps in
    /// Google's layout in it (loaded or not), by their path in the folder.
    pub(crate) fn file_names(&self) -> Vec<String> {
        let folder = Folder::read(&self.dir).unwrap_or_default();
        let mut names: Vec<String> = folder.files.into_iter().map(|f| f.name).collect();
        names.extend(
            folder
                .errors
                .iter()
                .map(|e| failure_of(&self.dir, e).0)
                .filter(|name| !name.is_empty()),
        );
        names.sort();
        names.dedup();
        names
    }

    /// Loads every file of the folder again. `builtin` are the names the built-in tools take;
    /// a Python tool may not reuse one.
    pub(crate) async fn reload(&self, host: Arc<dyn pysandbox::Host>, builtin: &HashSet<String>) {
        let _one_at_a_time = self.reloading.lock().await;
        let Some(sandbox) = self.sandbox() else {
            return;
        };
        let mut statuses: BTreeMap<String, FileStatus> = BTreeMap::new();
        // An unreadable folder has no files to load; its files show as they were until it can.
        let folder = Folder::read(&self.dir).unwrap_or_default();
        self.record_errors(&mut statuses, &folder.errors);
        let names: Vec<String> = folder.files.iter().map(|f| f.name.clone()).collect();
        let reporter = self.reporter();
        let count = folder.files.len();
        let mut loaded = PythonExtensions::load_files(&sandbox, folder.files, host, reporter).await;
        if count > 0 {
            // Loading a file runs it in the sandbox: the start-up script reads this line as the
            // first Python call's end.
            tracing::info!(
                "loaded the Python folder: files={count} tools={} (unix_ms={})",
                loaded.tools.len(),
                unix_ms()
            );
        }
        Self::refuse_clashing(&mut loaded, builtin, &mut statuses);
        self.record_errors(&mut statuses, &loaded.errors);
        Self::record_loaded(&mut statuses, &loaded, names);
        *lock(&self.statuses) = statuses;
        *self
            .extensions
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(loaded);
    }

    /// Where the files' reports (failures, printed output) go while they load and run: kept by
    /// file for the editor, only the latest [`REPORTS_PER_FILE`] so a chatty file cannot grow
    /// without end.
    fn reporter(&self) -> Reporter {
        let reports = self.reports.clone();
        Reporter::new(move |report| {
            let mut reports = lock(&reports);
            let list = reports.entry(report.file.clone()).or_default();
            list.push(PythonReportView::from(report));
            if list.len() > REPORTS_PER_FILE {
                list.remove(0);
            }
        })
    }

    /// Shows each file that did not load with its error alone: whatever the file had in
    /// `statuses` before is replaced.
    fn record_errors(&self, statuses: &mut BTreeMap<String, FileStatus>, errors: &[LoadError]) {
        for error in errors {
            let (file, failure) = failure_of(&self.dir, error);
            statuses.insert(
                file,
                FileStatus {
                    error: Some(failure),
                    ..FileStatus::default()
                },
            );
        }
    }

    /// A Python tool named like a built-in one would shadow it: the whole file is refused
    /// instead (its tools and callbacks dropped), and says which name to change.
    fn refuse_clashing(
        loaded: &mut PythonExtensions,
        builtin: &HashSet<String>,
        statuses: &mut BTreeMap<String, FileStatus>,
    ) {
        let clashing: Vec<(String, String)> = loaded
            .tools
            .iter()
            .filter(|t| builtin.contains(t.spec().name.as_str()))
            .map(|t| (t.module().filename().to_owned(), t.spec().name.clone()))
            .collect();
        for (file, tool) in &clashing {
            statuses.insert(
                file.clone(),
                FileStatus {
                    error: Some(LoadFailure {
                        zh: format!("{file}：工具名 {tool} 已被内置工具使用，请换个名字"),
                        en: format!(
                            "{file}: a built-in tool is already named {tool}; choose another name"
                        ),
                        line: None,
                        traceback: String::new(),
                    }),
                    ..FileStatus::default()
                },
            );
        }
        let refused: HashSet<&str> = clashing.iter().map(|(f, _)| f.as_str()).collect();
        loaded
            .tools
            .retain(|t| !refused.contains(t.module().filename()));
        loaded
            .callbacks
            .retain(|c| !refused.contains(c.module().filename()));
    }

    /// Adds what each loaded file gave the agent to its row, and makes sure every file of the
    /// folder (`names`) has a row, whatever it gave.
    fn record_loaded(
        statuses: &mut BTreeMap<String, FileStatus>,
        loaded: &PythonExtensions,
        names: Vec<String>,
    ) {
        for tool in &loaded.tools {
            let status = statuses
                .entry(tool.module().filename().to_owned())
                .or_default();
            status.tools.push(ToolDeclarationView::of(tool));
        }
        for callback in &loaded.callbacks {
            let status = statuses
                .entry(callback.module().filename().to_owned())
                .or_default();
            status.callbacks.push(callback.kind().to_string());
        }
        for name in names {
            statuses.entry(name).or_default();
        }
    }

    /// Every file as the editor lists it.
    pub(crate) fn file_views(&self) -> Vec<PythonFileView> {
        let statuses = lock(&self.statuses).clone();
        let reports = lock(&self.reports).clone();
        let files = self
            .files
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let waiting = !matches!(self.sandbox_state(), SandboxState::Ready(_));
        self.file_names()
            .into_iter()
            .map(|name| {
                let status = statuses.get(&name);
                let settings = files.get(&name).cloned().unwrap_or_default();
                PythonFileView::new(
                    &name,
                    status,
                    waiting || status.is_none(),
                    settings,
                    reports.get(&name).cloned().unwrap_or_default(),
                )
            })
            .collect()
    }

    pub(crate) fn sandbox_view(&self) -> SandboxStateView {
        match self.sandbox_state() {
            SandboxState::Idle => SandboxStateView::Idle,
            SandboxState::Preparing(since) => SandboxStateView::Preparing {
                elapsed_ms: u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX),
            },
            SandboxState::Ready(sandbox) => SandboxStateView::Ready {
                compiled_ms: match sandbox.compiled() {
                    pysandbox::CacheOutcome::Compiled(took) => {
                        Some(u64::try_from(took.as_millis()).unwrap_or(u64::MAX))
                    }
                    pysandbox::CacheOutcome::Hit | pysandbox::CacheOutcome::Precompiled => None,
                },
            },
            SandboxState::Failed(message) => SandboxStateView::Failed { message },
        }
    }

    /// Starts watching the folder: each settled change calls `changed`.
    pub(crate) fn watch(&self, changed: impl Fn() + Send + Sync + 'static) -> Result<(), String> {
        use notify::Watcher as _;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                if let Ok(event) = event {
                    // The JSON of an app in Google's layout declares its Python files.
                    let python = event
                        .paths
                        .iter()
                        .any(|p| p.extension().is_some_and(|e| e == "py" || e == "json"));
                    if python && !matches!(event.kind, notify::EventKind::Access(_)) {
                        let _ = tx.send(());
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        watcher
            .watch(&self.dir, notify::RecursiveMode::Recursive)
            .map_err(|e| format!("cannot watch {}: {e}", self.dir.display()))?;
        *lock(&self.watcher) = Some(watcher);
        tokio::spawn(async move {
            while rx.recv().await.is_some() {
                // Let a burst of writes settle, then load once.
                loop {
                    match tokio::time::timeout(SETTLE, rx.recv()).await {
                        Ok(Some(())) => continue,
                        Ok(None) => return,
                        Err(_) => break,
                    }
                }
                changed();
            }
        });
        Ok(())
    }
}

/// A load error, worded in both languages, with its line; the file by its name in `dir`.
fn failure_of(dir: &Path, error: &LoadError) -> (String, LoadFailure) {
    match error {
        LoadError::Python { file, error } => (file.clone(), python_failure(file, error)),
        LoadError::NothingDeclared { file, functions } => (
            file.clone(),
            refused_file(nothing_declared_zh(file, functions), error),
        ),
        LoadError::DuplicateTool { file, tool, first } => (
            file.clone(),
            refused_file(format!("{file}：工具 {tool} 已在 {first} 中定义"), error),
        ),
        LoadError::Read { path, source } => {
            let file = name_in_folder(dir, path);
            let zh = format!("无法读取 {file}：{source}");
            (file, refused_file(zh, error))
        }
        LoadError::Declaration { file, message } => (
            file.clone(),
            refused_file(format!("{file} 未加载：{message}"), error),
        ),
        LoadError::SubAgent { file, agent, root } => (
            file.clone(),
            refused_file(
                format!("{file} 是子代理 {agent} 的回调；本应用只运行根代理（{root}），因此未加载"),
                error,
            ),
        ),
        LoadError::ReadDir { .. } => (
            String::new(),
            refused_file(format!("无法读取文件夹：{error}"), error),
        ),
        // LoadError is not exhaustive to this crate; anything new is shown as it words itself.
        #[allow(unreachable_patterns)]
        other => (String::new(), refused_file(other.to_string(), other)),
    }
}

/// A file whose Python ran and failed (raised, ran past its deadline, broke the sandbox): the
/// user is pointed at the line when Python named one, and gets the traceback to read.
fn python_failure(file: &str, error: &SandboxError) -> LoadFailure {
    let line = error.python().and_then(|e| e.line);
    let traceback = error.detail();
    let (what_zh, what_en) = match error {
        SandboxError::Python(e) => {
            // A bare `raise ValueError` has no message; its type alone still says something.
            let message = if e.message.is_empty() {
                e.type_name.clone()
            } else {
                format!("{}: {}", e.type_name, e.message)
            };
            (message.clone(), message)
        }
        SandboxError::Deadline { limit, .. } => (
            format!("加载超时（超过 {} 秒）", limit.as_secs()),
            format!("loading ran past its {} s deadline", limit.as_secs()),
        ),
        other => (other.to_string(), other.to_string()),
    };
    let (zh, en) = match line {
        Some(line) => (
            format!("{file} 第 {line} 行：{what_zh}"),
            format!("{file}, line {line}: {what_en}"),
        ),
        None => (format!("{file}：{what_zh}"), format!("{file}: {what_en}")),
    };
    LoadFailure {
        zh,
        en,
        line,
        traceback,
    }
}

/// A file refused before any of its code could fail (unreadable, badly declared, clashing):
/// there is no line or traceback to show, and the English is pysandbox's own wording, so only
/// the Chinese sentence is ours.
fn refused_file(zh: String, error: &LoadError) -> LoadFailure {
    LoadFailure {
        zh,
        en: error.to_string(),
        line: None,
        traceback: String::new(),
    }
}

/// The Chinese for a file with nothing the agent can use: it says how a tool or a callback is
/// declared, and names the file's functions, since the usual slip is a missing `@tool`.
fn nothing_declared_zh(file: &str, functions: &[String]) -> String {
    let stem = file.strip_suffix(".py").unwrap_or(file);
    let mut zh = format!(
        "{file} 没有声明任何工具或回调：工具是与文件同名的函数（def {stem}(...)）或标了 @tool 的函数；回调须命名为 before_model_callback 等"
    );
    if !functions.is_empty() {
        zh.push_str(&format!(
            "。文件中有 {}：在希望助手调用的函数上一行加 @tool",
            functions.join("、")
        ));
    }
    zh
}

/// An unreadable file's path in the folder, as the folder's files are named
/// (`a/b/python_code.py`), so its error lands on the same row as the file.
fn name_in_folder(dir: &Path, path: &Path) -> String {
    path.strip_prefix(dir)
        .unwrap_or(path)
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn write(root: &Path, files: &[(&str, &str)]) {
        for (path, text) in files {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    }

    /// An app folder in Google's layout, dropped into `python/` as it is, loads with the names
    /// its JSON gives, beside a file of the folder's own; its sub-agent's callback shows why it
    /// is not loaded.
    #[tokio::test]
    async fn an_app_in_googles_layout_loads_beside_the_folders_own_files() {
        let dir = tempfile::tempdir().unwrap();
        let python = dir.path().join("python");
        write(
            &python,
            &[
                ("notes.py", "def notes() -> str:\n    return 'n'\n"),
                ("desk/app.json", r#"{"rootAgent": "main"}"#),
                (
                    "desk/tools/lookup/lookup.json",
                    r#"{"name": "lookup", "pythonFunction": {"name": "find", "description": "Finds it."}}"#,
                ),
                (
                    "desk/tools/lookup/python_function/python_code.py",
                    "def find(key: str) -> dict:\n    return {'key': key}\n",
                ),
                (
                    "desk/agents/main/before_model_callbacks/one/python_code.py",
                    "def before_model_callback(callback_context, llm_request):\n    return None\n",
                ),
                (
                    "desk/agents/helper/before_model_callbacks/two/python_code.py",
                    "def before_model_callback(callback_context, llm_request):\n    return None\n",
                ),
            ],
        );
        let tools = PythonTools::new(
            python,
            dir.path().join("cache"),
            crate::resources::Resources::new(None),
        );
        tools.prepare_sandbox();
        assert!(tools.sandbox().is_some(), "{:?}", tools.sandbox_state());
        tools
            .reload(Arc::new(pysandbox::NoHost), &HashSet::new())
            .await;
        let views = tools.file_views();
        let summary: Vec<(&str, &str)> = views
            .iter()
            .map(|f| (f.name.as_str(), f.status.as_str()))
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "desk/agents/helper/before_model_callbacks/two/python_code.py",
                    "error"
                ),
                (
                    "desk/agents/main/before_model_callbacks/one/python_code.py",
                    "loaded"
                ),
                ("desk/tools/lookup/python_function/python_code.py", "loaded"),
                ("notes.py", "loaded"),
            ]
        );
        assert!(
            views[0]
                .error
                .as_ref()
                .unwrap()
                .en
                .contains("sub-agent helper"),
            "{:?}",
            views[0].error
        );
        assert_eq!(views[1].callbacks, ["before_model_callback"]);
        let extensions = tools.extensions();
        let names: Vec<&str> = extensions
            .tools
            .iter()
            .map(|t| t.spec().name.as_str())
            .collect();
        assert_eq!(names, ["notes", "lookup"]);
        assert_eq!(views[2].tools[0].description, "Finds it.");
    }
}
