//! Loading user files: the extensions folder (bad files reported with traceback and line, the
//! rest loaded), and tool declarations from signatures, docstrings and `@tool(...)`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use agent::AgentTool;
use pysandbox::{CallbackKind, LoadError, NoHost, PythonExtensions, Reporter, SandboxError};
use serde_json::{Map, json};

#[tokio::test]
async fn a_folder_loads_its_good_files_and_reports_the_broken_ones() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        (
            "a_tool.py",
            "def a_tool(x: int) -> int:\n    return x + 1\n",
        ),
        (
            "b_syntax.py",
            "def b_syntax():\n    return 1\n\ndef broken(:\n    pass\n",
        ),
        (
            "c_raises.py",
            "import json\nCONFIG = json.loads(undefined_name)\n",
        ),
        (
            "d_dup.py",
            "@tool\ndef a_tool() -> str:\n    return 'again'\n",
        ),
        (
            "e_hooks.py",
            "def after_model_callback(callback_context, llm_response):\n    pass\n\ndef before_agent_callback(callback_context):\n    pass\n",
        ),
        ("notes.txt", "not python"),
    ];
    for (name, source) in files {
        std::fs::write(dir.path().join(name), source).unwrap();
    }
    let loaded = PythonExtensions::load_dir(
        &common::sandbox(),
        dir.path(),
        Arc::new(NoHost),
        Reporter::default(),
    )
    .await
    .unwrap();

    let tools: Vec<&str> = loaded.tools.iter().map(|t| t.name()).collect();
    assert_eq!(tools, ["a_tool"]);
    let kinds: Vec<CallbackKind> = loaded.callbacks.iter().map(|c| c.kind()).collect();
    assert_eq!(kinds, [CallbackKind::BeforeAgent, CallbackKind::AfterModel]);

    assert_eq!(loaded.errors.len(), 3, "{:?}", loaded.errors);
    let python = |i: usize| match &loaded.errors[i] {
        LoadError::Python {
            file,
            error: SandboxError::Python(e),
        } => (file.clone(), e.clone()),
        other => panic!("{other:?}"),
    };
    let (file, syntax) = python(0);
    assert_eq!(file, "b_syntax.py");
    assert_eq!(
        (syntax.type_name.as_str(), syntax.line),
        ("SyntaxError", Some(4))
    );
    assert!(
        syntax.traceback.contains("def broken(:"),
        "{}",
        syntax.traceback
    );
    let (file, raised) = python(1);
    assert_eq!(file, "c_raises.py");
    assert_eq!(
        (raised.type_name.as_str(), raised.line),
        ("NameError", Some(2))
    );
    assert!(
        raised
            .traceback
            .contains("File \"c_raises.py\", line 2, in <module>"),
        "{}",
        raised.traceback
    );
    assert!(
        loaded.errors[1]
            .to_string()
            .starts_with("c_raises.py, line 2: NameError: name 'undefined_name' is not defined"),
        "{}",
        loaded.errors[1]
    );
    assert!(matches!(
        &loaded.errors[2],
        LoadError::DuplicateTool { file, tool, first } if file == "d_dup.py" && tool == "a_tool" && first == "a_tool.py"
    ));

    // The tool that loaded works.
    let mut ctx = common::tool_context(json!({}));
    let mut args = Map::new();
    args.insert("x".to_owned(), json!(41));
    assert_eq!(
        loaded.tools[0].invoke(args, &mut ctx).await.unwrap().value,
        json!(42)
    );
}

#[tokio::test]
async fn declarations_come_from_signatures_docstrings_and_the_tool_decorator() {
    let source = r#"
from typing import Literal, Optional

def declared(
    title: str,
    count: int,
    ratio: float = 0.5,
    urgent: bool = False,
    tags: list[str] = None,
    extra: dict = None,
    when: Optional[str] = None,
    mode: Literal['fast', 'slow'] = 'fast',
    anything=None,
) -> dict:
    """Makes a thing.

    The long description is not the summary's business.

    Args:
        title: What to call it.
        count (int): How many,
            at least one.
        mode: How to make it.

    Returns:
        The thing.
    """
    return {}

@tool(name="post_message", description="Posts a message as the user.", requires_approval=True,
      scopes=["im:message", "im:message:send_as_user"], deduplicates=True)
def post(chat_id: str, text: str, **options) -> None:
    pass

def _helper():
    pass
"#;
    let module = pysandbox::PythonModule::load(&common::sandbox(), "declared.py", source)
        .await
        .unwrap();
    let tools = module.tools();
    assert_eq!(
        tools.len(),
        2,
        "only the file's tool and the declared one: {tools:?}"
    );
    let declared = &tools[0];
    assert_eq!(declared.name, "declared");
    assert_eq!(
        declared.description,
        "Makes a thing.\n\nThe long description is not the summary's business."
    );
    assert_eq!(
        declared.parameters,
        json!({
            "type": "object",
            "properties": {
                "title": {"type": "string", "description": "What to call it."},
                "count": {"type": "integer", "description": "How many, at least one."},
                "ratio": {"type": "number", "default": 0.5},
                "urgent": {"type": "boolean", "default": false},
                "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}], "default": null},
                "extra": {"anyOf": [{"type": "object"}, {"type": "null"}], "default": null},
                "when": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
                "mode": {"enum": ["fast", "slow"], "type": "string", "description": "How to make it.", "default": "fast"},
                "anything": {"default": null}
            },
            "required": ["title", "count"],
            "additionalProperties": false
        })
    );
    assert!(!declared.requires_approval && declared.scopes.is_empty() && !declared.deduplicates);

    let post = &tools[1];
    assert_eq!(
        (
            post.name.as_str(),
            post.function.as_str(),
            post.description.as_str()
        ),
        ("post_message", "post", "Posts a message as the user.")
    );
    assert!(post.requires_approval && post.deduplicates);
    assert_eq!(post.scopes, ["im:message", "im:message:send_as_user"]);
    assert_eq!(
        post.parameters,
        json!({
            "type": "object",
            "properties": {"chat_id": {"type": "string"}, "text": {"type": "string"}},
            "required": ["chat_id", "text"]
        }),
        "**options allows more arguments"
    );
    // As an AgentTool, the engine sees the same.
    let host: Arc<dyn pysandbox::Host> = Arc::new(NoHost);
    let tool = &pysandbox::PythonTool::all(
        &Arc::new(module),
        &common::sandbox(),
        &host,
        &Reporter::default(),
    )[1];
    assert!(tool.requires_approval(&Map::new()));
    assert_eq!(tool.scopes(), ["im:message", "im:message:send_as_user"]);
    assert!(tool.deduplicates());
    assert_eq!(tool.declaration().name, "post_message");
}
