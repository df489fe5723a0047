//! The real Claude Code CLI (tests/agents: npm `@anthropic-ai/claude-code`, run by claude.mjs with
//! its own empty HOME) against the scripted model server, started here in the test, with the
//! companion as its MCP server and `--permission-prompt-tool mcp__feishu-companion__approve`:
//! the model has it run two shell commands that write; the first waits in the companion's inbox,
//! is approved and runs exactly once, the second is rejected and never runs, and the reason
//! reaches the model in the tool result. Once over Streamable HTTP with the token in a header,
//! once through the stdio relay with the token in the relay's environment.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use agent::{Decision, Verdict};
use emulator::model_server::{ModelServer, Script};
use serde_json::{Value, json};

use super::peers::{Peer, agents_dir, node, require_agents_packages};
use super::user::{self, Demo};

const ONCE: &str = "echo ran >> once.txt";
const NOPE: &str = "touch nope.txt";
const WHY: &str = "not in this folder";
/// The model's last words, once it has heard the rejection.
const CLOSING: &str = "The second command was refused: not in this folder.";

/// Claude asks for ONCE, then (after its result) for NOPE, then repeats the refusal's reason.
/// Appending (>>) makes a second run of ONCE visible in the file.
fn script() -> Script {
    let text = json!({
        // Claude Code may ask side questions (a title, a summary) a script cannot foresee.
        "fallback": "OK.",
        "steps": [
            {
                "when": {"role": "user", "contains": "once.txt"},
                "reply": {"text": "I'll append to the file.", "tool_calls": [
                    {"name": "Bash", "arguments": {"command": ONCE, "description": "Append to once.txt"}}
                ]}
            },
            // Before the answer to any Bash result, so the refusal is told apart.
            {"when": {"role": "tool", "tool": "Bash", "contains": WHY}, "reply": {"text": CLOSING}},
            {
                "when": {"role": "tool", "tool": "Bash"},
                "reply": {"text": "Now the other one.", "tool_calls": [
                    {"name": "Bash", "arguments": {"command": NOPE, "description": "Create nope.txt"}}
                ]}
            }
        ]
    });
    Script::from_json(&text.to_string()).unwrap()
}

/// Starts Claude Code (through tests/agents/claude-run.mjs) with `server` as its
/// `feishu-companion` MCP server, working in `work`.
fn start_claude(demo: &Demo, model: &ModelServer, server: Value, work: &Path) -> Peer {
    require_agents_packages(true);
    let spec = json!({
        "prompt": "Please append a line to once.txt, then try the other command.",
        "mcpConfig": {"mcpServers": {"feishu-companion": server}},
        "permissionTool": "mcp__feishu-companion__approve",
        "modelBaseUrl": model.base_url(),
        "cwd": work,
        "timeoutMs": 150_000,
    });
    let file = demo.data_dir().join("claude-spec.json");
    std::fs::write(&file, spec.to_string()).unwrap();
    let mut command = Command::new(node());
    command
        .arg(agents_dir().join("claude-run.mjs"))
        .arg(&file)
        .current_dir(agents_dir());
    Peer::spawn("claude-run.mjs", command)
}

/// The text of the tool results in the last message of a Messages request.
fn tool_results(body: &Value) -> Vec<(bool, String)> {
    let last = body["messages"].as_array().and_then(|m| m.last());
    let blocks = last.and_then(|m| m["content"].as_array()).cloned();
    blocks
        .unwrap_or_default()
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let text = match &b["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
                _ => String::new(),
            };
            (b["is_error"] == true, text)
        })
        .collect()
}

/// What the model server was asked so far, for a failure's message: each request's path, the
/// step that answered and the tools Claude offered.
fn model_log(model: &ModelServer) -> String {
    let lines: Vec<String> = model
        .requests()
        .iter()
        .map(|r| {
            let tools: Vec<&str> = r.body["tools"]
                .as_array()
                .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
                .unwrap_or_default();
            format!("{} step {:?} tools {tools:?}", r.path, r.step)
        })
        .collect();
    format!("--- the model server was asked:\n{}", lines.join("\n"))
}

/// Plays the user for Claude's two commands and checks everything each side saw. `project`:
/// the folder the requests must name (the relay's), if any.
async fn approve_once_reject_once(server: impl FnOnce(&Demo) -> Value, relayed: bool) {
    let demo = user::demo("Claude Code").await;
    let model = ModelServer::start(script()).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let work_dir = std::fs::canonicalize(work.path()).unwrap();
    let mut claude = start_claude(&demo, &model, server(&demo), &work_dir);

    // Claude's first command waits here until the user approves it; nothing has run yet.
    let asked = || model_log(&model);
    let first = demo
        .held_or(&mut claude, &[], Duration::from_secs(90), asked)
        .await;
    assert_eq!(first.tool, "approve");
    assert_eq!(first.args["tool_name"], "Bash");
    assert_eq!(first.args["command"], ONCE);
    assert!(
        first.args["tool_use_id"]
            .as_str()
            .unwrap()
            .starts_with("toolu_"),
        "{:?}",
        first.args
    );
    let project = relayed.then(|| work_dir.display().to_string());
    assert_eq!(
        first.args.get("project").and_then(Value::as_str),
        project.as_deref()
    );
    let card = demo.card(&first).preview.expect("a card");
    assert!(card.summary.en.contains(ONCE), "{:?}", card.summary);
    assert!(
        !work_dir.join("once.txt").exists(),
        "it ran before it was approved"
    );
    demo.app
        .decide(&first.call_id, Decision::Approve)
        .await
        .unwrap();

    let second = demo
        .held_or(
            &mut claude,
            std::slice::from_ref(&first.call_id),
            Duration::from_secs(90),
            asked,
        )
        .await;
    assert_eq!(second.args["command"], NOPE);
    let reject = Decision::Reject {
        reason: Some(WHY.into()),
    };
    demo.app.decide(&second.call_id, reject).await.unwrap();

    let status = claude.finish(Duration::from_secs(150)).await;
    let run = claude.report();
    let why = || format!("{run:#}\n{}", claude.log());
    assert!(status.success(), "{}", why());
    assert_eq!(run["code"], 0, "{}", why());
    let result = &run["result"];
    assert_eq!(result["is_error"], false, "{}", why());
    assert_eq!(result["result"], CLOSING, "{}", why());
    let denied: Vec<&Value> = result["permission_denials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| &d["tool_input"]["command"])
        .collect();
    assert_eq!(denied, [NOPE], "{}", why());

    // The approved command ran exactly once; the rejected one never.
    let ran = std::fs::read_to_string(work_dir.join("once.txt")).unwrap();
    assert_eq!(ran, "ran\n");
    assert!(!work_dir.join("nope.txt").exists());

    // The model was sent the first command's result, then the rejection's reason as an error.
    let requests = model.requests();
    let answered = |step: usize| {
        let of_step: Vec<_> = requests
            .iter()
            .filter(|r| r.path == "/v1/messages" && r.step == Some(step))
            .collect();
        assert_eq!(of_step.len(), 1, "step {step} answered once");
        tool_results(&of_step[0].body)
    };
    let after_first = answered(2);
    assert!(
        after_first.iter().all(|(error, _)| !error),
        "{after_first:?}"
    );
    let after_second = answered(1);
    assert_eq!(after_second.len(), 1, "{after_second:?}");
    let (is_error, text) = &after_second[0];
    assert!(is_error, "{text}");
    assert!(text.contains(WHY), "{text}");

    demo.assert_recorded(&first, Verdict::Approved).await;
    demo.assert_recorded(&second, Verdict::Rejected).await;
    model.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_over_http_runs_an_approved_command_once_and_hears_a_rejections_reason() {
    approve_once_reject_once(
        |demo| {
            json!({
                "type": "http",
                "url": demo.url,
                "headers": {"Authorization": format!("Bearer {}", demo.token)},
            })
        },
        false,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_through_the_stdio_relay_runs_an_approved_command_once_and_hears_a_rejections_reason()
 {
    approve_once_reject_once(
        |demo| {
            json!({
                "type": "stdio",
                "command": env!("CARGO_BIN_EXE_companion-cli"),
                "args": ["mcp", "--data-dir", demo.data_dir()],
                "env": {"FEISHU_COMPANION_TOKEN": demo.token},
            })
        },
        true,
    )
    .await;
}
