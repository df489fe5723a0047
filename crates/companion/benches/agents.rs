//! What a connected agent's request costs (issue 24, part 5), measured in one run against the
//! demo app's real server over loopback HTTP:
//!
//! - `ping`: an MCP ping — rmcp's client and server and the HTTP round trip, nothing of the
//!   app: the floor;
//! - `request_allowed_by_rule`: `request_approval` answered by an always-allow rule — the whole
//!   path (token check, a session and a turn of the agent's own engine agent, the gate, the
//!   rule, the dispatch, the answer) with nothing held;
//! - `inbox_with_1000_held`: the inbox (`pending_calls`) while a thousand requests wait.
//!
//! The gate's overhead per request is `request_allowed_by_rule` minus `ping`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use agent::RuleEffect;
use companion::{AppPaths, Companion, OpenOptions, Settings};
use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientRequest, PingRequest};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

async fn open(dir: &std::path::Path) -> Companion {
    let paths = AppPaths::under(dir);
    paths.create().unwrap();
    let mut settings = Settings::default();
    settings.feishu.redirect_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    settings.save(&paths.settings_file()).unwrap();
    Companion::open(
        paths,
        OpenOptions {
            memory_keys: true,
            agents_port: Some(0),
            ..OpenOptions::default()
        },
    )
    .await
    .unwrap()
}

async fn client(app: &Companion, name: &str, concurrent: usize) -> RunningService<RoleClient, ()> {
    let new = app.add_connected_agent(name).unwrap();
    let url = app.connected_agents().url.unwrap();
    let config = StreamableHttpClientTransportConfig::with_uri(url)
        .auth_header(new.token)
        .max_concurrent_requests(concurrent);
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    ().serve(transport).await.unwrap()
}

fn request(summary: &str) -> CallToolRequestParams {
    CallToolRequestParams::new("request_approval")
        .with_arguments(json!({"summary": summary}).as_object().cloned().unwrap())
}

fn bench(c: &mut Criterion) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let app = rt.block_on(open(dir.path()));
    let fast = rt.block_on(client(&app, "Bench", 16));
    app.engine()
        .add_rule(
            "request_approval",
            RuleEffect::AlwaysAllow,
            Default::default(),
            None,
        )
        .unwrap();
    let mut group = c.benchmark_group("agents");
    group.measurement_time(Duration::from_secs(8));
    group.bench_function("ping", |b| {
        b.iter(|| {
            rt.block_on(async {
                let ping = PingRequest {
                    method: Default::default(),
                    extensions: Default::default(),
                };
                fast.peer()
                    .send_request(ClientRequest::PingRequest(ping))
                    .await
                    .unwrap()
            })
        })
    });
    group.bench_function("request_allowed_by_rule", |b| {
        b.iter(|| {
            rt.block_on(async {
                let result = fast.peer().call_tool(request("bench")).await.unwrap();
                assert_ne!(result.is_error, Some(true));
            })
        })
    });
    // A thousand held: the rule goes, a second agent asks a thousand times.
    for rule in app.rules().unwrap() {
        app.revoke_rule(&rule.id).unwrap();
    }
    let many = rt.block_on(client(&app, "Load", 1000));
    for i in 0..1000 {
        let peer = many.peer().clone();
        rt.spawn(async move { peer.call_tool(request(&format!("held {i}"))).await });
    }
    rt.block_on(async {
        while app.pending_calls().unwrap().len() < 1000 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    group.bench_function("inbox_with_1000_held", |b| {
        b.iter(|| assert_eq!(app.pending_calls().unwrap().len(), 1000))
    });
    group.finish();
    drop(many);
}

criterion_group!(benches, bench);
criterion_main!(benches);
