//! Which files of an extensions folder are Python extensions, and what their folder says they
//! are: the folder's own `.py` files, which declare themselves, and apps in Google's layout for
//! Conversational Agents (a `cxas pull` of an app, or Google's samples), whose JSON declares them.
//!
//! Google's layout, under an app folder holding `app.json` (or `app.yaml`):
//! - `tools/<tool>/python_function/python_code.py` is a tool, declared by `tools/<tool>/<tool>.json`
//!   (`displayName` or `name`; `pythonFunction.name`, the function; `pythonFunction.description`,
//!   what the model is told; `pythonFunction.pythonCode`, where the code is). Without a JSON file
//!   the tool and its function are named after the folder, as Google's tooling names them.
//! - `agents/<agent>/<kind>_callbacks/<callback>/python_code.py` is a callback of that kind
//!   (`before_model_callbacks/…` defines `before_model_callback`). When `agents/<agent>/<agent>.json`
//!   is there, exactly the callbacks it lists run (`beforeModelCallbacks: [{"pythonCode": …}]`),
//!   in its order, as on Google's platform; the others are reported as not listed, or disabled
//!   (`"disabled": true`). Without it every callback folder runs, in name order.
//!
//! This app runs one agent, so only the root agent's callbacks load (`rootAgent` of `app.json`, or
//! the only agent); a sub-agent's are reported as such, because in Google's runtime they run only
//! while that agent has the conversation. Files are named by their path in the folder
//! (`Sample/tools/lookup_account/python_function/python_code.py`), so the many `python_code.py`
//! files stay apart in tracebacks and reports.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::LoadError;
use crate::module::CallbackKind;

/// How deep under the extensions folder an app folder is looked for: deep enough for a pulled
/// app (`python/<app>/`) and Google's template (`python/<template>/cxas_app/<app>/`).
const APP_DEPTH: usize = 3;

/// A tool declared beside its code, as Google's JSON declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredTool {
    /// The tool's name, as the model and `tools.NAME` call it.
    pub name: String,
    /// The Python function that implements it.
    pub function: String,
    /// What the model is told it does; `None` leaves the docstring's summary.
    pub description: Option<String>,
    /// Where the declaration is, for error messages.
    pub declared_in: String,
}

/// What a file's folder says the file is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Declared {
    /// A file on its own: its tools are the function named like it and those marked `@tool`,
    /// its callbacks the functions named `before_model_callback` and so on.
    #[default]
    Standalone,
    /// A tool's code in Google's layout: exactly this tool.
    Tool(DeclaredTool),
    /// A callback's code in Google's layout: exactly this kind's function.
    Callback {
        /// The kind its folder names.
        kind: CallbackKind,
        /// The agent it belongs to.
        agent: String,
    },
}

/// One Python file to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Its path in the extensions folder, `/`-separated: `notes.py`, or
    /// `Sample/tools/lookup_account/python_function/python_code.py`.
    pub name: String,
    /// Its source.
    pub source: String,
    /// What its folder says it is.
    pub declared: Declared,
}

/// The Python files of an extensions folder, and those it has that cannot load as they are.
#[derive(Debug, Default)]
pub struct Folder {
    /// The files to load, in the order their callbacks run: the folder's own files by name,
    /// then each app's tools and its root agent's callbacks.
    pub files: Vec<SourceFile>,
    /// Files that are not loaded: unreadable, badly declared, a sub-agent's, not listed.
    pub errors: Vec<LoadError>,
}

impl Folder {
    /// Reads `dir`: its `.py` files, and the apps in Google's layout in it (or that it is).
    /// Only an unreadable `dir` is an error; anything wrong inside is in [`Folder::errors`].
    pub fn read(dir: &Path) -> std::io::Result<Folder> {
        let mut folder = Folder::default();
        let mut names = Vec::new();
        for entry in list(dir)? {
            if entry.is_file() && entry.extension().is_some_and(|e| e == "py") {
                names.push(entry);
            }
        }
        for path in names {
            folder.add(dir, &path, Declared::Standalone);
        }
        let mut apps = Vec::new();
        find_apps(dir, dir, 0, &mut apps);
        for app in apps {
            folder.read_app(dir, &app);
        }
        Ok(folder)
    }

    /// Reads `path` as a file named by its place under `root`.
    fn add(&mut self, root: &Path, path: &Path, declared: Declared) {
        match std::fs::read_to_string(path) {
            Ok(source) => self.files.push(SourceFile {
                name: relative(root, path),
                source,
                declared,
            }),
            Err(source) => self.errors.push(LoadError::Read {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    fn declaration_error(&mut self, root: &Path, path: &Path, message: String) {
        self.errors.push(LoadError::Declaration {
            file: relative(root, path),
            message,
        });
    }

    fn read_app(&mut self, root: &Path, app: &Path) {
        for tool_dir in subfolders(&app.join("tools")) {
            self.read_tool(root, app, &tool_dir);
        }
        let agents = subfolders(&app.join("agents"));
        let main = root_agent(app, &agents);
        for agent_dir in &agents {
            self.read_agent(root, app, agent_dir, main.as_deref());
        }
    }

    fn read_tool(&mut self, root: &Path, app: &Path, tool_dir: &Path) {
        let folder_name = file_name(tool_dir);
        let json_path = tool_json(tool_dir, &folder_name);
        let json = match json_path.as_deref().map(read_json).transpose() {
            Ok(json) => json,
            Err(message) => {
                let path = json_path.unwrap_or_else(|| tool_dir.to_path_buf());
                return self.declaration_error(root, &path, message);
            }
        };
        let python = json.as_ref().and_then(|j| j.get("pythonFunction"));
        let code = python
            .and_then(|p| text(p, "pythonCode"))
            .map(|code| app.join(code))
            .unwrap_or_else(|| tool_dir.join("python_function").join("python_code.py"));
        if !code.is_file() {
            // Not a Python tool (an OpenAPI or data-store tool has a JSON file and no code), or
            // a declaration whose code is missing, which is worth saying.
            if let (Some(python), Some(json_path)) = (python, &json_path)
                && python.get("pythonCode").is_some()
            {
                let message = format!("its code {} is missing", relative(root, &code));
                self.declaration_error(root, json_path, message);
            }
            return;
        }
        let declared_in = match &json_path {
            Some(path) => relative(root, path),
            None => format!(
                "{} (no {folder_name}.json, so the tool is named after its folder)",
                relative(root, tool_dir)
            ),
        };
        let name = json
            .as_ref()
            .and_then(|j| text(j, "displayName").or_else(|| text(j, "name")))
            .unwrap_or(&folder_name)
            .to_owned();
        if !is_tool_name(&name) {
            let message = format!(
                "the tool name {name:?} is not one a model can call: use letters, digits, _ and - \
                 (at most 64)"
            );
            return self.declaration_error(root, json_path.as_deref().unwrap_or(tool_dir), message);
        }
        let tool = DeclaredTool {
            function: python
                .and_then(|p| text(p, "name"))
                .unwrap_or(&name)
                .to_owned(),
            description: python
                .and_then(|p| text(p, "description"))
                .map(str::to_owned),
            name,
            declared_in,
        };
        self.add(root, &code, Declared::Tool(tool));
    }

    fn read_agent(&mut self, root: &Path, app: &Path, agent_dir: &Path, main: Option<&str>) {
        let agent = file_name(agent_dir);
        let json_path = agent_dir.join(format!("{agent}.json"));
        let json = if json_path.is_file() {
            match read_json(&json_path) {
                Ok(json) => Some(json),
                Err(message) => return self.declaration_error(root, &json_path, message),
            }
        } else {
            None
        };
        for kind in CallbackKind::ALL {
            let folders = subfolders(&agent_dir.join(format!("{kind}s")));
            let found: Vec<PathBuf> = folders
                .iter()
                .map(|f| f.join("python_code.py"))
                .filter(|code| code.is_file())
                .collect();
            let listed = json.as_ref().map(|j| listed_callbacks(j, kind, app));
            let (run, disabled) = match listed {
                Some(listed) => listed,
                None => (found.clone(), Vec::new()),
            };
            for code in &found {
                let message = if disabled.contains(code) {
                    format!(
                        "disabled in {}, so it is not loaded",
                        relative(root, &json_path)
                    )
                } else if !run.contains(code) {
                    format!(
                        "not listed among the {kind}s of {}, so Google's runtime does not run it",
                        relative(root, &json_path)
                    )
                } else {
                    continue;
                };
                self.declaration_error(root, code, message);
            }
            for code in run {
                if main.is_some_and(|main| main != agent) {
                    self.errors.push(LoadError::SubAgent {
                        file: relative(root, &code),
                        agent: agent.clone(),
                        root: main.unwrap_or_default().to_owned(),
                    });
                } else if !code.is_file() {
                    let message = format!(
                        "{} lists it among the {kind}s, but there is no such file",
                        relative(root, &json_path)
                    );
                    self.declaration_error(root, &code, message);
                } else {
                    let agent = agent.clone();
                    self.add(root, &code, Declared::Callback { kind, agent });
                }
            }
        }
    }
}

/// The entries of `dir`, sorted by name.
fn list(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        paths.push(entry?.path());
    }
    paths.sort();
    Ok(paths)
}

/// The folders in `dir`, by name, hidden ones left out; none when it cannot be read.
fn subfolders(dir: &Path) -> Vec<PathBuf> {
    list(dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.is_dir() && !file_name(p).starts_with('.'))
        .collect()
}

/// Finds app folders at `dir` and below it: those with `app.json` or `app.yaml` (as Google's
/// linter finds them), and the extensions folder itself when it holds an app's `tools/` or
/// `agents/` (the contents of an app copied in). Not below an app: its own folders are its parts.
fn find_apps(top: &Path, dir: &Path, depth: usize, apps: &mut Vec<PathBuf>) {
    let has_app_file = ["app.json", "app.yaml"]
        .iter()
        .any(|f| dir.join(f).is_file());
    let is_top_app = dir == top && ["tools", "agents"].iter().any(|f| dir.join(f).is_dir());
    if has_app_file || is_top_app {
        apps.push(dir.to_path_buf());
        return;
    }
    if depth < APP_DEPTH {
        for sub in subfolders(dir) {
            find_apps(top, &sub, depth + 1, apps);
        }
    }
}

/// The agent whose callbacks load: `rootAgent` of `app.json` (a name or a resource path), or
/// the only agent; `None` when neither says, and then every agent's callbacks load.
fn root_agent(app: &Path, agents: &[PathBuf]) -> Option<String> {
    let declared = read_json(&app.join("app.json"))
        .ok()
        .and_then(|j| text(&j, "rootAgent").map(str::to_owned))
        .and_then(|r| r.rsplit('/').next().map(str::to_owned));
    match (declared, agents) {
        (Some(name), _) => Some(name),
        (None, [only]) => Some(file_name(only)),
        (None, _) => None,
    }
}

/// The `python_code.py` files an agent's JSON lists for `kind`, resolved under `app`: those
/// that run, in order, and those marked `disabled` (none of either when it lists none).
fn listed_callbacks(agent: &Value, kind: CallbackKind, app: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let list = agent.get(json_key(kind)).and_then(Value::as_array);
    let (mut run, mut disabled) = (Vec::new(), Vec::new());
    for callback in list.into_iter().flatten() {
        let Some(code) = text(callback, "pythonCode") else {
            continue;
        };
        if callback.get("disabled").and_then(Value::as_bool) == Some(true) {
            disabled.push(app.join(code));
        } else {
            run.push(app.join(code));
        }
    }
    (run, disabled)
}

/// The agent JSON's key for `kind`'s list: `beforeModelCallbacks` and so on.
fn json_key(kind: CallbackKind) -> &'static str {
    match kind {
        CallbackKind::BeforeAgent => "beforeAgentCallbacks",
        CallbackKind::AfterAgent => "afterAgentCallbacks",
        CallbackKind::BeforeModel => "beforeModelCallbacks",
        CallbackKind::AfterModel => "afterModelCallbacks",
        CallbackKind::BeforeTool => "beforeToolCallbacks",
        CallbackKind::AfterTool => "afterToolCallbacks",
    }
}

/// A tool folder's declaration: `<folder>.json`, or its only JSON file.
fn tool_json(tool_dir: &Path, folder_name: &str) -> Option<PathBuf> {
    let named = tool_dir.join(format!("{folder_name}.json"));
    if named.is_file() {
        return Some(named);
    }
    let json: Vec<PathBuf> = list(tool_dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "json"))
        .collect();
    match <[PathBuf; 1]>::try_from(json) {
        Ok([only]) => Some(only),
        Err(_) => None,
    }
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("it is not valid JSON: {e}"))
}

/// A non-empty string field of a JSON object.
fn text<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value
        .get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// Whether models accept `name` as a function's name.
fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `path` under `root`, `/`-separated (the name files are known by on every platform).
fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}
