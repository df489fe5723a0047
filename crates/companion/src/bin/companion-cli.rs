//! A terminal front end on the application core: the same functions the desktop window calls.
//! Until the desktop app lands, `scripts/run` starts this, in demo mode when nothing is
//! configured.
#![allow(clippy::print_stdout)]

use std::io::Write as _;
use std::path::PathBuf;

use agent::{CallRecord, CallStatus, Decision, EngineEvent, Risk};
use anyhow::Context as _;
use companion::{AppPaths, Companion, OpenOptions, SignInStatus, UiEvent};
use tokio::io::AsyncBufReadExt as _;

const HELP: &str = "\
  直接输入消息与助手对话 / type a message to talk to the assistant
  /p                 待处理事项 / list what waits for you
  /a [n]             批准第 n 项（默认第 1 项）/ approve item n (default 1)
  /r [n] [理由]      拒绝并说明理由 / reject, with an optional reason
  /e n {json}        修改参数后批准 / approve with edited arguments
  /login             登录飞书（授权卡片）/ sign in to Feishu for what waits
  /decline [n]       不登录，取消该调用 / decline signing in for item n
  /cancel            停止当前回合 / stop the current turn
  /forget            退出登录并清除全部密钥（保留对话、规则和审计记录）/ sign out and forget all secrets
  /reset yes         重置应用：下次启动时删除数据库、设置和密钥文件 / reset the app at the next start
  /quit              退出 / quit";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The first argument is the program's own path.
    let args: Vec<String> = std::env::args().collect();
    let args = &args[1.min(args.len())..];
    if args.first().is_some_and(|a| a == "mcp") {
        return relay(&args[1..]).await;
    }
    let paths = match args.iter().position(|a| a == "--data-dir") {
        Some(i) => AppPaths::under(&PathBuf::from(
            args.get(i + 1).context("--data-dir needs a folder")?,
        )),
        None => AppPaths::system().context("this system has no standard folder for app data")?,
    };
    // For trials and tests: a master key that lives only as long as the process.
    let options = OpenOptions {
        memory_keys: args.iter().any(|a| a == "--ephemeral-keys"),
        ..OpenOptions::default()
    };
    let app = Companion::open(paths.clone(), options)
        .await
        .with_context(|| format!("cannot open the app data in {}", paths.data_dir.display()))?;
    println!("飞书助手 · Feishu Companion");
    if app.is_demo() {
        println!("【演示模式 / Demo】内置的飞书模拟器和脚本模型在本机运行，不会连接真实飞书。");
        println!(
            "Running on the built-in Feishu emulator and scripted model; nothing reaches real Feishu."
        );
        println!("试试 / try: 明天我有什么安排？  ·  帮我约个产品评审会  ·  看看我的待办");
    }
    let (source, notice) = app.key_source();
    println!("密钥 / keys: {source}");
    if let Some(notice) = notice {
        println!("⚠ {notice}");
    }
    println!("{HELP}\n");
    let session = match app.list_sessions().await?.first() {
        Some(meta) => meta.id.clone(),
        None => app.create_session().await?,
    };
    let printer = tokio::spawn(print_events(app.subscribe()));
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    prompt();
    while let Some(line) = lines.next_line().await? {
        let line = line.trim().to_owned();
        if line == "/quit" {
            break;
        }
        if let Err(e) = handle(&app, &session, &line).await {
            println!("✗ {e}");
        }
        prompt();
    }
    printer.abort();
    Ok(())
}

/// What `companion-cli mcp --help` prints.
const RELAY_USAGE: &str = "\
Usage: companion-cli mcp [--token <token>] [--data-dir <dir>]

Relays MCP over stdin/stdout to the running Feishu Companion whose data folder is <dir> (the
system's when not given), as `feishu-companion mcp` does. The token comes from Settings ->
Connected agents, by --token or FEISHU_COMPANION_TOKEN. Unlike the desktop app's relay it
cannot start the app: start it first.
";

/// `companion-cli mcp`: the desktop shell's stdio relay through the same core function, so it
/// can be run (and tested with real MCP clients) without building the desktop app. Nothing but
/// the protocol is written to stdout.
async fn relay(args: &[String]) -> anyhow::Result<()> {
    let mut token = std::env::var(companion::agents::api::TOKEN_VARIABLE).unwrap_or_default();
    let mut data_dir = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--help" | "-h" => {
                eprint!("{RELAY_USAGE}");
                return Ok(());
            }
            "--token" => token = rest.next().context("--token needs the token")?.clone(),
            "--data-dir" => {
                data_dir = Some(PathBuf::from(
                    rest.next().context("--data-dir needs a folder")?,
                ))
            }
            other => anyhow::bail!("unknown argument {other:?}\n\n{RELAY_USAGE}"),
        }
    }
    let paths = match data_dir {
        Some(dir) => AppPaths::under(&dir),
        None => AppPaths::system().context("this system has no standard folder for app data")?,
    };
    // The client's working folder is its project, as the desktop relay says.
    let project = std::env::current_dir()
        .ok()
        .map(|d| d.display().to_string());
    let start_app = || {
        Err(std::io::Error::other(
            "companion-cli cannot start the app; start `companion-cli` (or the desktop app) on this data folder first",
        ))
    };
    companion::agents::relay::relay(&paths, token, project, start_app)
        .await
        .context("companion-cli mcp")
}

fn prompt() {
    print!("> ");
    let _ = std::io::stdout().flush();
}

fn nth(pending: &[CallRecord], arg: Option<&str>) -> anyhow::Result<CallRecord> {
    let n: usize = arg
        .map(str::parse)
        .transpose()
        .context("give the item's number from /p")?
        .unwrap_or(1);
    pending
        .get(n.saturating_sub(1))
        .cloned()
        .context("no such item; /p lists them")
}

async fn handle(app: &Companion, session: &str, line: &str) -> anyhow::Result<()> {
    let mut words = line.splitn(3, ' ');
    let command = words.next().unwrap_or("");
    let pending = app.pending()?;
    match command {
        "" => {}
        "/help" => println!("{HELP}"),
        "/p" => list_pending(&pending),
        "/a" => {
            let call = nth(&pending, words.next())?;
            report(app.decide(&call.call_id, Decision::Approve).await?.status);
        }
        "/r" => {
            let call = nth(&pending, words.next())?;
            let reason = words.next().map(str::to_owned);
            report(
                app.decide(&call.call_id, Decision::Reject { reason })
                    .await?
                    .status,
            );
        }
        "/e" => {
            let call = nth(&pending, words.next())?;
            let args = edited_arguments(words.next())?;
            report(
                app.decide(&call.call_id, Decision::ApproveEdited(args))
                    .await?
                    .status,
            );
        }
        "/login" => {
            let ticket = app.begin_sign_in(Vec::new()).await?;
            println!(
                "在浏览器中打开以登录 / open this to sign in:\n  {}",
                ticket.url
            );
        }
        "/decline" => {
            let call = nth(&pending, words.next())?;
            report(app.decline_sign_in(&call.call_id).await?.status);
        }
        "/cancel" => {
            app.cancel_turn(session).await?;
        }
        "/forget" => {
            let result = app.forget_secrets().await?;
            println!(
                "已清除 {} 项密钥 / {} secrets forgotten",
                result.deleted, result.deleted
            );
        }
        "/reset" => reset(app, words.next())?,
        _ if command.starts_with('/') => println!("未知命令 / unknown command; /help"),
        _ => send(app, session, line),
    }
    Ok(())
}

/// `/p`: what waits, numbered as `/a`, `/r`, `/e` and `/decline` take it.
fn list_pending(pending: &[CallRecord]) {
    if pending.is_empty() {
        println!("没有待处理事项 / nothing waits for you");
    }
    for (i, call) in pending.iter().enumerate() {
        println!("{}. {}", i + 1, describe(call));
    }
}

/// `/e`'s arguments: only a JSON object can stand for a call's arguments, so anything else is
/// refused here, before the engine sees it.
fn edited_arguments(
    text: Option<&str>,
) -> anyhow::Result<serde_json::Map<String, serde_json::Value>> {
    let args: serde_json::Value = serde_json::from_str(text.unwrap_or(""))
        .context("edited arguments must be a JSON object")?;
    args.as_object()
        .cloned()
        .context("edited arguments must be a JSON object")
}

/// `/reset`: it deletes the database, settings and key files, so it must be confirmed
/// (`/reset yes`); without `yes` it only lists what would go.
fn reset(app: &Companion, confirm: Option<&str>) -> anyhow::Result<()> {
    let items = companion::data::reset_items(app.paths());
    if confirm != Some("yes") {
        println!("重置将删除 / a reset deletes:");
        for item in &items {
            println!("  {} / {}: {}", item.what.zh, item.what.en, item.path);
        }
        println!("确认请输入 / to confirm, type: /reset yes");
    } else {
        app.reset_app()?;
        println!("下次启动时重置；请退出 (/quit) / the app resets at its next start; /quit now");
    }
    Ok(())
}

/// A message for the assistant. The turn runs in the background so the prompt stays free for
/// `/cancel` and for deciding what the turn asks; its answer streams in through the events.
fn send(app: &Companion, session: &str, line: &str) {
    let app = app.clone();
    let session = session.to_owned();
    let text = line.to_owned();
    tokio::spawn(async move {
        match app.send_message(&session, &text, false).await {
            Ok(outcome) => report(outcome.status),
            Err(e) => println!("\n✗ {e}"),
        }
    });
}

/// Says where a turn stands, from its status as the UI reads it (`suspended`, `cancelled`…).
fn report(status: String) {
    let text = match status.as_str() {
        "suspended" => "（等待你处理，/p 查看 / waiting for you: /p）",
        "cancelled" => "（已停止 / stopped）",
        "failed" => "（出错了 / failed）",
        _ => "",
    };
    if !text.is_empty() {
        println!("\n{text}");
        prompt();
    }
}

fn describe(call: &CallRecord) -> String {
    match call.status {
        CallStatus::AwaitingApproval => {
            let mut text = match &call.preview {
                Some(preview) => {
                    let risk = if preview.risk == Risk::High {
                        "⚠ 高风险 / high risk · "
                    } else {
                        ""
                    };
                    let mut lines = vec![format!(
                        "{risk}{} / {}",
                        preview.summary.zh, preview.summary.en
                    )];
                    for field in &preview.fields {
                        lines.push(format!(
                            "     {} / {}: {}",
                            field.label.zh, field.label.en, field.value
                        ));
                    }
                    for change in &preview.changes {
                        lines.push(format!(
                            "     {} / {}: {} → {}",
                            change.field.zh, change.field.en, change.from, change.to
                        ));
                    }
                    lines.join("\n")
                }
                None => format!(
                    "{} {}",
                    call.tool,
                    serde_json::Value::Object(call.args.clone())
                ),
            };
            text.push_str("\n     /a 批准 approve · /r 拒绝 reject · /e 修改 edit");
            text
        }
        CallStatus::AwaitingAuth => format!(
            "需要飞书授权 / needs Feishu permission: {}\n     /login 登录 sign in · /decline 取消 decline",
            call.auth_scopes.join(", ")
        ),
        CallStatus::OutcomeUnknown => {
            format!("{}: 结果未知 / outcome unknown after a crash", call.tool)
        }
        _ => format!("{} ({:?})", call.tool, call.status),
    }
}

async fn print_events(mut events: tokio::sync::broadcast::Receiver<UiEvent>) {
    while let Ok(event) = events.recv().await {
        match event {
            UiEvent::Engine(event) => print_engine_event(*event),
            UiEvent::SignIn(status) => print_sign_in(status),
            UiEvent::Connect(status) => {
                let view = companion::connect::view::ConnectView::from(&status);
                println!("\n◆ {}", serde_json::to_string(&view).unwrap_or_default())
            }
            UiEvent::OpenCall { call_id } => {
                println!("\n◆ 飞书中点了「在应用中打开」/ opened from Feishu: {call_id}")
            }
            UiEvent::OpenInbox => {
                println!("\n◆ 飞书中点了「在应用中打开」/ opened from Feishu: the inbox")
            }
            // The terminal shows no cards to mark.
            UiEvent::RemoteCards { .. } => {}
            UiEvent::Mcp(event) => print_mcp_event(event),
        }
    }
}

/// The conversation as it happens: the answer's text as it streams (flushed, as it comes
/// without a newline), the end of a turn, and each call that now waits for the user; the rest
/// of the engine's events are for the desktop window.
fn print_engine_event(event: EngineEvent) {
    match event {
        EngineEvent::Event { event, .. } if event.partial => {
            if let Some(content) = &event.content {
                print!("{}", content.text());
                let _ = std::io::stdout().flush();
            }
        }
        EngineEvent::Event { event, .. } if event.turn_complete && !event.is_user() => {
            println!()
        }
        EngineEvent::Call(call)
            if call.status == CallStatus::AwaitingApproval
                || call.status == CallStatus::AwaitingAuth =>
        {
            println!("\n◆ {}", describe(&call));
        }
        _ => {}
    }
}

/// Where a sign-in stands, with what to do next when it is the user's move (confirm in Feishu,
/// fix the app's settings, sign in again).
fn print_sign_in(status: SignInStatus) {
    match status {
        SignInStatus::SignedIn { name, .. } => {
            println!("\n✓ 已登录 / signed in: {name}")
        }
        SignInStatus::Failed { message } => println!("\n✗ {message}"),
        SignInStatus::Declined => {
            println!("\n✗ 已取消授权 / sign-in declined")
        }
        SignInStatus::Refused { problem } => {
            println!("\n✗ {} / {}", problem.title.zh, problem.title.en);
            println!("  {}\n  {}", problem.fix.zh, problem.fix.en);
            if let Some(value) = &problem.value {
                println!("  {value}");
            }
        }
        SignInStatus::InBrowser => {
            println!("\n… 登录在浏览器中继续 / the sign-in continues in your browser")
        }
        SignInStatus::Waiting {
            device: Some(code), ..
        } => {
            println!(
                "\n… 在飞书中打开并确认 / confirm in Feishu: {} (code {})",
                code.url, code.user_code
            )
        }
        SignInStatus::Waiting { .. } => {}
        SignInStatus::Expired => {
            println!("\n✗ 二维码已过期，请重新登录 / the code expired; sign in again")
        }
    }
}

/// Progress of a slow MCP call or of setting up lark-mcp, so a long wait shows it is moving;
/// the signals to read the servers or their questions again are for the desktop window.
fn print_mcp_event(event: companion::mcp::McpEvent) {
    match event {
        companion::mcp::McpEvent::Progress {
            progress,
            total,
            message,
            ..
        } => {
            let of = total.map(|t| format!("/{t}")).unwrap_or_default();
            let words = message.unwrap_or_default();
            println!("\n… MCP {progress}{of} {words}")
        }
        companion::mcp::McpEvent::Servers | companion::mcp::McpEvent::Questions => {}
        companion::mcp::McpEvent::Setup {
            step,
            done,
            total,
            message,
        } => {
            let of = total.map(|t| format!("/{t}")).unwrap_or_default();
            println!(
                "\n… lark-mcp {step} {done}{of} {} / {}",
                message.zh, message.en
            )
        }
    }
}
