//! Engine overhead per tool round trip (design.md §5, budget under 1 ms median, no growth with
//! session length): user message → scripted function call → no-op tool → scripted reply, with the
//! SQLite store on a file, measured for turns 1–20 and 980–1000 of one session — once with the
//! default history window, and once with the whole history sent to the model (issue 26: turn 1000
//! must stay within 2× of turn 20, so building the request cannot walk the history every time).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent::{
    Content, Engine, EngineConfig, FunctionCall, FunctionTool, LlmAgent, LlmResponse, Part,
    ScriptedModel, ToolReturn,
};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Map, json};

/// Answers a user message with a call of `noop`, and the tool's answer with a reply.
fn model() -> ScriptedModel {
    ScriptedModel::from_fn(|request| {
        let last = request
            .contents
            .last()
            .expect("the request has the user's message");
        Ok(if last.function_responses().next().is_some() {
            LlmResponse::from_parts(vec![Part::from_text("完成了。")])
        } else {
            LlmResponse::from_parts(vec![Part::FunctionCall(FunctionCall::new(
                "noop",
                json!({"n": 1}).as_object().cloned().unwrap_or_default(),
            ))])
        })
    })
    .with_chunk_chars(0)
    // As a provider does: a kept request would make the engine copy the history it shares.
    .without_recording()
}

fn engine(path: &Path, config: &EngineConfig) -> Engine {
    let store = Arc::new(store::Store::open(path).unwrap());
    let agent = LlmAgent::builder("assistant", Arc::new(model()))
        .tool(FunctionTool::new(
            "noop",
            "does nothing",
            json!({"type": "object"}),
            |_, _| ToolReturn::from("ok"),
        ))
        .build()
        .unwrap();
    Engine::new(agent, store, config.clone()).unwrap()
}

fn turn(rt: &tokio::runtime::Runtime, engine: &Engine, session: &str) -> Duration {
    let start = Instant::now();
    let outcome = rt
        .block_on(engine.send_message(session, Content::user_text("跑一下")))
        .unwrap();
    let elapsed = start.elapsed();
    assert_eq!(outcome.status, agent::InvocationStatus::Completed);
    elapsed
}

/// Times turns `first..=last` of a session, starting each batch from a copy of `template`
/// (a database already holding `first - 1` turns), so every measured turn is at that depth.
fn bench_turns(c: &mut Criterion, name: &str, config: &EngineConfig, first: usize, last: usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("template.db");
    let session = {
        let engine = engine(&template, config);
        let session = engine.create_session("u", &Map::new()).unwrap();
        for _ in 1..first {
            turn(&rt, &engine, &session);
        }
        session
    };
    let mut group = c.benchmark_group("round_trip");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(8));
    let mut batch = 0;
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                batch += 1;
                let path = dir.path().join(format!("run-{batch}.db"));
                for suffix in ["", "-wal", "-shm"] {
                    let from = format!("{}{suffix}", template.display());
                    if Path::new(&from).exists() {
                        std::fs::copy(&from, format!("{}{suffix}", path.display())).unwrap();
                    }
                }
                let engine = engine(&path, config);
                // Untimed, as a running app has the session loaded already.
                rt.block_on(engine.open_session(&session)).unwrap();
                for _ in first..=last {
                    if done == iters {
                        break;
                    }
                    total += turn(&rt, &engine, &session);
                    done += 1;
                }
                drop(engine);
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
            }
            total
        });
    });
    group.finish();
}

fn round_trip(c: &mut Criterion) {
    let window = EngineConfig::default();
    bench_turns(c, "turns_1_to_20", &window, 1, 20);
    bench_turns(c, "turns_980_to_1000", &window, 980, 1000);
    let full = EngineConfig {
        history_turns: usize::MAX,
        ..EngineConfig::default()
    };
    bench_turns(c, "full_history_turns_1_to_20", &full, 1, 20);
    bench_turns(c, "full_history_turns_980_to_1000", &full, 980, 1000);
}

criterion_group!(benches, round_trip);
criterion_main!(benches);
