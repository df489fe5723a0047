//! What the app adds to an MCP call, and what many servers cost (issue 23, part 6).
//!
//! `round_trip`: a no-op tool of a stdio server on the official TypeScript SDK
//! (`tests/mcp/probe-server.mjs`, `noop`), called three ways in one run — raw JSON-RPC lines
//! written to the server's stdin and read from its stdout (the server's own time and the
//! pipes: the floor), the app's connection (rmcp, progress route, cancel guard), and the agent
//! tool the engine runs (plus the answer's mapping). The overhead is the difference.
//!
//! `scale`: 50 servers with 20 tools each (1,000 tools), known from an earlier run and not
//! started: the agent tools the hub gives, the tool declarations a model request carries (as
//! JSON), and what the settings page reads of every server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use agent::{CallbackContext, ToolContext};
use criterion::{Criterion, criterion_group, criterion_main};
use mcp::{Hub, Resolved, ServerConfig, ToolInfo, TransportConfig};
use serde_json::{Map, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

fn probe() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/probe-server.mjs")
}

fn stdio(id: &str) -> Resolved {
    Resolved {
        config: ServerConfig {
            id: id.into(),
            name: id.into(),
            transport: TransportConfig::Stdio {
                command: "node".into(),
                args: vec![probe().to_string_lossy().into_owned()],
                env: vec![],
                cwd: None,
            },
            enabled: true,
            trusted: false,
            read_tools: vec!["noop".into()],
            timeout_secs: 30,
        },
        env: BTreeMap::new(),
        headers: BTreeMap::new(),
        credentials: None,
    }
}

/// The floor: the same server, spoken to in raw JSON-RPC lines.
struct Raw {
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    next: u64,
    _child: tokio::process::Child,
}

impl Raw {
    async fn start() -> Raw {
        let mut child = tokio::process::Command::new("node")
            .arg(probe())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut raw = Raw {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()).lines(),
            next: 1,
            _child: child,
        };
        raw.request("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})).await;
        raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        raw
    }

    async fn send(&mut self, message: serde_json::Value) {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).await.unwrap();
    }

    async fn request(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let id = self.next;
        self.next += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let line = self.stdout.next_line().await.unwrap().unwrap();
            let answer: serde_json::Value = serde_json::from_str(&line).unwrap();
            if answer["id"] == id {
                return answer;
            }
        }
    }
}

fn round_trip(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("round_trip");
    let mut raw = rt.block_on(Raw::start());
    group.bench_function("raw_json_rpc_floor", |b| {
        b.iter(|| rt.block_on(raw.request("tools/call", json!({"name": "noop", "arguments": {}}))))
    });
    let hub = Hub::new();
    hub.configure(vec![stdio("probe")], &BTreeMap::new());
    let conn = hub.connection("probe").unwrap();
    rt.block_on(conn.start()).unwrap();
    group.bench_function("connection_call", |b| {
        b.iter(|| rt.block_on(conn.call("noop", Map::new(), "c")).unwrap())
    });
    let tool = hub
        .tools()
        .into_iter()
        .find(|t| t.name() == "mcp__probe__noop")
        .unwrap();
    group.bench_function("agent_tool_run", |b| {
        b.iter(|| {
            let ctx = CallbackContext::new("i", "a", "s", Default::default(), Default::default());
            rt.block_on(tool.run(Map::new(), &mut ToolContext::new(ctx, "c")))
        })
    });
    group.finish();
}

fn many_servers() -> Hub {
    let hub = Hub::new();
    let mut known = BTreeMap::new();
    let mut servers = Vec::new();
    for s in 0..50 {
        let id = format!("server-{s}");
        let tools: Vec<ToolInfo> = (0..20)
            .map(|t| ToolInfo {
                name: format!("tool_{t}"),
                title: Some(format!("Tool {t}")),
                description: "Does one thing with a few arguments, as real tools describe themselves at some length.".into(),
                input_schema: json!({"type": "object", "properties": {
                    "id": {"type": "string", "description": "What to act on"},
                    "text": {"type": "string"}, "limit": {"type": "integer"}},
                    "required": ["id"]}),
                read_only_hint: Some(t % 2 == 0),
                destructive_hint: None,
            })
            .collect();
        known.insert(id.clone(), tools);
        servers.push(stdio(&id));
    }
    hub.configure(servers, &known);
    hub
}

fn scale(c: &mut Criterion) {
    let _rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let hub = many_servers();
    assert_eq!(hub.tools().len(), 1000);
    let mut group = c.benchmark_group("scale_50_servers_1000_tools");
    group.bench_function("agent_tools", |b| b.iter(|| hub.tools()));
    let tools = hub.tools();
    group.bench_function("declarations_as_request_json", |b| {
        b.iter(|| {
            let declarations: Vec<_> = tools.iter().map(|t| t.declaration()).collect();
            serde_json::to_vec(&declarations).unwrap()
        })
    });
    group.bench_function("settings_page_read", |b| {
        b.iter(|| {
            hub.connections()
                .iter()
                .map(|c| (c.status(), c.tools().len(), c.stderr().len()))
                .collect::<Vec<_>>()
        })
    });
    group.finish();
}

criterion_group!(benches, round_trip, scale);
criterion_main!(benches);
