//! Folders in Google's layout for Conversational Agents apps load as Google declares them: each
//! tool's `python_code.py` under the name and description of the JSON beside it, each callback's
//! `python_code.py` as its folder's kind, in the agent JSON's order, the root agent's only.
//!
//! The app under `tests/fixtures/google_app/front_desk` is written for these tests, in the layout
//! of Google's samples (`GoogleCloudPlatform/cxas-scrapi`); `google_samples.rs` runs what its
//! files do, and Google's own samples when a copy of that repository is at hand.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pysandbox::{CallbackKind, Declared, Folder, LoadError, NoHost, PythonExtensions, Reporter};

const APP: &str = "google_app/front_desk";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

async fn load(dir: &Path) -> PythonExtensions {
    PythonExtensions::load_dir(
        &common::sandbox(),
        dir,
        Arc::new(NoHost),
        Reporter::default(),
    )
    .await
    .unwrap()
}

/// Each error as (file, message), the file by its path in the folder.
fn errors(loaded: &PythonExtensions) -> Vec<(String, String)> {
    loaded
        .errors
        .iter()
        .map(|e| match e {
            LoadError::Declaration { file, .. }
            | LoadError::SubAgent { file, .. }
            | LoadError::Python { file, .. } => (file.clone(), e.to_string()),
            other => (String::new(), other.to_string()),
        })
        .collect()
}

#[tokio::test]
async fn an_app_loads_its_tools_by_their_json_and_its_root_agents_callbacks_in_order() {
    let loaded = load(&fixtures()).await;
    let tools: Vec<(&str, &str, &str, &str)> = loaded
        .tools
        .iter()
        .map(|t| {
            let spec = t.spec();
            (
                spec.name.as_str(),
                spec.function.as_str(),
                spec.description.as_str(),
                t.module().filename(),
            )
        })
        .collect();
    assert_eq!(
        tools,
        [
            (
                "balance_lookup",
                "find_balance",
                "Tells a verified caller what they owe.",
                "google_app/front_desk/tools/balance_lookup/python_function/python_code.py"
            ),
            (
                "remember_request",
                "remember_request",
                "Notes what the caller wants done next.",
                "google_app/front_desk/tools/remember_request/python_function/python_code.py"
            ),
        ],
        "named by the JSON (or the folder without one); web_lookup is not Python"
    );
    assert_eq!(
        loaded.tools[0].spec().parameters["properties"]["account"]["description"],
        "The account number."
    );
    let callbacks: Vec<(CallbackKind, &str)> = loaded
        .callbacks
        .iter()
        .map(|c| (c.kind(), c.module().filename()))
        .collect();
    let at = |path: &str| format!("{APP}/agents/desk_agent/{path}/python_code.py");
    assert_eq!(
        callbacks,
        [
            (
                CallbackKind::BeforeAgent,
                at("before_agent_callbacks/verify_caller").as_str()
            ),
            (
                CallbackKind::BeforeModel,
                at("before_model_callbacks/greet").as_str()
            ),
            (
                CallbackKind::BeforeModel,
                at("before_model_callbacks/act_on_request").as_str()
            ),
            (
                CallbackKind::AfterModel,
                at("after_model_callbacks/say_goodbye").as_str()
            ),
        ],
        "the JSON's order (greet before act_on_request, though not in name order)"
    );
    let errors = errors(&loaded);
    let files: Vec<&str> = errors.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        files,
        [
            &format!(
                "{APP}/agents/billing_agent/before_model_callbacks/billing_only/python_code.py"
            ),
            at("after_agent_callbacks/forgotten").as_str(),
            at("before_model_callbacks/switched_off").as_str(),
        ],
        "{errors:#?}"
    );
    assert!(
        errors[0].1.contains("sub-agent billing_agent")
            && errors[0].1.contains("only the root agent (desk_agent)"),
        "{}",
        errors[0].1
    );
    assert!(
        errors[1]
            .1
            .contains("not listed among the after_agent_callbacks"),
        "{}",
        errors[1].1
    );
    assert!(errors[2].1.contains("disabled in"), "{}", errors[2].1);
}

#[test]
fn the_folder_names_each_file_by_its_path_and_says_what_it_is() {
    let folder = Folder::read(&fixtures().join("google_app")).unwrap();
    let tool = folder
        .files
        .iter()
        .find(|f| {
            f.name
                .ends_with("remember_request/python_function/python_code.py")
        })
        .unwrap();
    let Declared::Tool(declared) = &tool.declared else {
        panic!("{:?}", tool.declared);
    };
    assert_eq!(
        (declared.name.as_str(), declared.function.as_str()),
        ("remember_request", "remember_request")
    );
    assert!(declared.declared_in.contains("no remember_request.json"));
    assert!(
        folder
            .files
            .iter()
            .all(|f| f.name.starts_with("front_desk/")),
        "named under the folder read, not under the app"
    );
}

fn write(root: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

#[tokio::test]
async fn a_badly_declared_file_says_what_is_wrong_and_the_rest_of_the_app_loads() {
    let dir = tempfile::tempdir().unwrap();
    let code = "def answer() -> str:\n    return 'yes'\n";
    write(
        dir.path(),
        &[
            ("alone.py", "def alone() -> int:\n    return __name__\n"),
            (
                "app/app.json",
                "{\"rootAgent\": \"projects/p/locations/l/apps/a/agents/main\"}",
            ),
            (
                "app/tools/good/good.json",
                r#"{"name": "good", "pythonFunction": {"name": "answer"}}"#,
            ),
            ("app/tools/good/python_function/python_code.py", code),
            ("app/tools/broken_json/broken_json.json", "{\"name\": "),
            ("app/tools/broken_json/python_function/python_code.py", code),
            (
                "app/tools/wrong_fn/wrong_fn.json",
                r#"{"name": "wrong_fn", "pythonFunction": {"name": "missing"}}"#,
            ),
            ("app/tools/wrong_fn/python_function/python_code.py", code),
            (
                "app/tools/spaced/spaced.json",
                r#"{"displayName": "Look Up", "pythonFunction": {"name": "answer"}}"#,
            ),
            ("app/tools/spaced/python_function/python_code.py", code),
            (
                "app/tools/gone/gone.json",
                r#"{"name": "gone", "pythonFunction": {"name": "answer", "pythonCode": "tools/gone/python_function/python_code.py"}}"#,
            ),
            (
                "app/agents/main/before_tool_callbacks/mixed_up/python_code.py",
                "def after_tool_callback(tool, args, ctx, response):\n    return None\n",
            ),
            (
                "app/agents/main/after_tool_callbacks/fine/python_code.py",
                "def after_tool_callback(tool, args, ctx, response):\n    return None\n",
            ),
            (
                "app/agents/other/before_agent_callbacks/x/python_code.py",
                "def before_agent_callback(ctx):\n    return None\n",
            ),
        ],
    );
    let loaded = load(dir.path()).await;
    let tools: Vec<&str> = loaded
        .tools
        .iter()
        .map(|t| t.spec().name.as_str())
        .collect();
    assert_eq!(tools, ["alone", "good"]);
    let kinds: Vec<CallbackKind> = loaded.callbacks.iter().map(|c| c.kind()).collect();
    assert_eq!(
        kinds,
        [CallbackKind::AfterTool],
        "no agent JSON: every folder of main runs"
    );
    let errors = errors(&loaded);
    let find = |file: &str| {
        errors
            .iter()
            .find(|(f, _)| f == file)
            .map(|(_, m)| m.as_str())
            .unwrap_or_else(|| panic!("no error for {file}: {errors:#?}"))
    };
    assert!(find("app/tools/broken_json/broken_json.json").contains("not valid JSON"));
    assert!(
        find("app/tools/spaced/spaced.json").contains("\"Look Up\" is not one a model can call")
    );
    assert!(
        find("app/tools/gone/gone.json")
            .contains("app/tools/gone/python_function/python_code.py is missing")
    );
    assert!(
        find("app/agents/other/before_agent_callbacks/x/python_code.py")
            .contains("sub-agent other")
    );
    let wrong = find("app/tools/wrong_fn/python_function/python_code.py");
    assert!(
        wrong.contains("app/tools/wrong_fn/wrong_fn.json names the function 'missing'"),
        "{wrong}"
    );
    let mixed = find("app/agents/main/before_tool_callbacks/mixed_up/python_code.py");
    assert!(
        mixed.contains("defines no function named before_tool_callback"),
        "{mixed}"
    );
    assert_eq!(errors.len(), 6, "{errors:#?}");

    // A file standing alone keeps its own module name (a Google one is `python_code`, below).
    let mut ctx = common::tool_context(serde_json::json!({}));
    let run = loaded.tools[0]
        .invoke(serde_json::Map::new(), &mut ctx)
        .await
        .unwrap();
    assert_eq!(run.value, "alone");
}

#[tokio::test]
async fn an_apps_contents_copied_into_the_folder_load_too() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            (
                "tools/ping/python_function/python_code.py",
                "def ping() -> str:\n    return __name__\n",
            ),
            (
                "agents/solo/after_agent_callbacks/bye/python_code.py",
                "def after_agent_callback(ctx):\n    return None\n",
            ),
        ],
    );
    let loaded = load(dir.path()).await;
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    assert_eq!(loaded.tools[0].spec().name, "ping");
    assert_eq!(loaded.callbacks[0].kind(), CallbackKind::AfterAgent);
    let mut ctx = common::tool_context(serde_json::json!({}));
    let run = loaded.tools[0]
        .invoke(serde_json::Map::new(), &mut ctx)
        .await
        .unwrap();
    // Google's runtime and tests import the file as the module `python_code`.
    assert_eq!(run.value, "python_code");
}
